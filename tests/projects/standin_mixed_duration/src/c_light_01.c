/* gpufleet-hog: 40 1 */
int light_01(int x) { return x - 1; }
