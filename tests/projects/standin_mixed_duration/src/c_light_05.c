/* gpufleet-hog: 40 1 */
int light_05(int x) { return x - 5; }
