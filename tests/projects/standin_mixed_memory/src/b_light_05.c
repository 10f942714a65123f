/* gpufleet-hog: 40 1.5 */
int light_05(int x) { return x + 5; }
