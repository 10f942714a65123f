/* gpufleet-hog: 40 1 */
int light_08(int x) { return x - 8; }
