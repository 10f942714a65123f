/* gpufleet-hog: 40 1 */
int light_02(int x) { return x - 2; }
