/* gpufleet-hog: 300 1.5 */
int heavy_short_2(int x) { return x * 2; }
