/* A stand-in for one heavy nvcc compile: takes a known amount of memory for a known time, then writes its output.
 * usage: hog MIB SECONDS OUTPUT INPUT [RAMP_SECONDS]
 * RAMP_SECONDS spreads the allocation over that time, as a compiler's memory grows (what a watchdog can see coming).
 * The output appears only when the step finishes, so a step the OOM killer ends leaves nothing behind. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: %s MIB SECONDS OUTPUT INPUT [RAMP_SECONDS]\n", argv[0]);
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
    double ramp = argc == 6 ? strtod(argv[5], NULL) : 0.0;
    size_t chunk = 4 << 20;
    size_t chunks = (size + chunk - 1) / chunk;
    long pause_ns = ramp > 0 ? (long)(ramp * 1e9 / (double)chunks) : 0;
    for (size_t done = 0; done < size; done += chunk) {
        /* touch every page: resident, charged to the cgroup */
        memset(block + done, 0x5a, size - done < chunk ? size - done : chunk);
        if (pause_ns > 0) {
            struct timespec step = {pause_ns / 1000000000L, pause_ns % 1000000000L};
            nanosleep(&step, NULL);
        }
    }
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
