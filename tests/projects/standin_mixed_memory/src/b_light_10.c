/* gpufleet-hog: 40 1.5 */
int light_10(int x) { return x + 10; }
