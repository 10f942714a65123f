/* gpufleet-hog: 300 3 */
int heavy_1(int x) { return x * 1; }
