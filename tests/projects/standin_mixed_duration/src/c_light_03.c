/* gpufleet-hog: 40 1 */
int light_03(int x) { return x - 3; }
