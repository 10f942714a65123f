/* gpufleet-hog: 350 6 */
int heavy_long(int x) { return x * 7; }
