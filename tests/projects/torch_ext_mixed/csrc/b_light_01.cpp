// gpufleet-hog: 40 1
extern "C" int light_01(void) { return 1; }
