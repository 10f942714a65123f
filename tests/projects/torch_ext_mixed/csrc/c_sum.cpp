// gpufleet-hog: 30 0.5
extern "C" {
int heavy_1(void); int heavy_2(void);
int light_01(void);
int light_02(void);
int light_03(void);
int light_04(void);
int light_05(void);
int light_06(void);
int light_07(void);
int light_08(void);
int gpufleet_sum(void) { return heavy_1() + heavy_2() + light_01() + light_02() + light_03() + light_04() + light_05() + light_06() + light_07() + light_08() ; }
}
