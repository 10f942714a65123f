/* gpufleet-hog: 40 1.5 */
int light_02(int x) { return x + 2; }
