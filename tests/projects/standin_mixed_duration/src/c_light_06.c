/* gpufleet-hog: 40 1 */
int light_06(int x) { return x - 6; }
