/* gpufleet-hog: 300 3 */
int heavy_2(int x) { return x * 2; }
