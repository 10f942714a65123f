// gpufleet-hog: 300 4
extern "C" int heavy_2(void) { return 2; }
