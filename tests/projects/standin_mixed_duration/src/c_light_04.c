/* gpufleet-hog: 40 1 */
int light_04(int x) { return x - 4; }
