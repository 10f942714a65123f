/* gpufleet-hog: 300 1.5 */
int heavy_short_1(int x) { return x * 1; }
