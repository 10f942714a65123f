/* gpufleet-hog: 40 1.5 */
int light_03(int x) { return x + 3; }
