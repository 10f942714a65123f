// gpufleet-hog: 300 4
extern "C" int heavy_1(void) { return 1; }
