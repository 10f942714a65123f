/* gpufleet-hog: 40 1.5 */
int light_04(int x) { return x + 4; }
