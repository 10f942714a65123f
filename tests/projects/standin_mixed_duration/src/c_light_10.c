/* gpufleet-hog: 40 1 */
int light_10(int x) { return x - 10; }
