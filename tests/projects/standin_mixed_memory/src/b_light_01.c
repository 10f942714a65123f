/* gpufleet-hog: 40 1.5 */
int light_01(int x) { return x + 1; }
