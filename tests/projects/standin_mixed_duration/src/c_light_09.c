/* gpufleet-hog: 40 1 */
int light_09(int x) { return x - 9; }
