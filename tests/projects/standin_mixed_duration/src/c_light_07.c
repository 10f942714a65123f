/* gpufleet-hog: 40 1 */
int light_07(int x) { return x - 7; }
