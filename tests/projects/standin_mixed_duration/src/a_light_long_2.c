/* gpufleet-hog: 40 6 */
int light_long_2(int x) { return x + 2; }
