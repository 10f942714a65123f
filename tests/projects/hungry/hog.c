/* A stand-in for one heavy nvcc compile: takes a known amount of memory for a known time, then writes its output.
 * usage: hog MIB SECONDS OUTPUT INPUT
 * The output appears only when the step finishes, so a step the OOM killer ends leaves nothing behind. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s MIB SECONDS OUTPUT INPUT\n", argv[0]);
        return 2;
    }
    size_t mib = (size_t)strtoul(argv[1], NULL, 10);
    double seconds = strtod(argv[2], NULL);
    size_t size = mib << 20;
    char *block = malloc(size);
    if (!block) {
        perror("malloc");
        return 1;
    }
    memset(block, 0x5a, size); /* touch every page: resident, charged to the cgroup */
    struct timespec pause = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
    nanosleep(&pause, NULL);
    FILE *out = fopen(argv[3], "w");
    if (!out) {
        perror(argv[3]);
        return 1;
    }
    fprintf(out, "compiled %s with %zu MiB (checksum %d)\n", argv[4], mib, block[size - 1]);
    fclose(out);
    free(block);
    return 0;
}
