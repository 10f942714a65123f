/* gpufleet-hog: 40 1.5 */
int light_07(int x) { return x + 7; }
