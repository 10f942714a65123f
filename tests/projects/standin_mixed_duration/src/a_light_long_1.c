/* gpufleet-hog: 40 6 */
int light_long_1(int x) { return x + 1; }
