/* gpufleet-hog: 40 1.5 */
int light_06(int x) { return x + 6; }
