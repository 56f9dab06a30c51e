// The file operations helixflow's journal and records make for each `run` step of
// `run --force`, and nothing else: no process started, no event serialized, one thread. Per
// step: the step's record removed, its attempt's two folders, `stdout.log`, `stderr.log` and
// `gates.json` created, six events of 300 bytes appended to `events.jsonl`, the new record
// written to a temporary file and renamed over; once per 32 steps, as the removals ahead are,
// the records written since are written out together (`sync_file_range`: all started, then each
// waited for) and the folder synced. bench/costs.sh (section 5)
// times it next to helixflow and ninja: what a step's journal costs on this file system at the
// least.
//
// Usage: journal_floor DIR STEPS   (DIR gets passed/ and runs/, as a state folder does)
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void put(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) { perror(path); exit(1); }
    if (text && write(fd, text, strlen(text)) < 0) { perror("write"); exit(1); }
    close(fd);
}

// The records of steps [from, to) written out together (all started, then each waited for),
// then the folder synced.
static void sync_group(const char *passed, int from, int to, int dirfd) {
    char path[4096];
    int fds[32], n = 0;
    for (int j = from; j < to && n < 32; j++) {
        snprintf(path, sizeof path, "%s/p%05d.json", passed, j);
        fds[n] = open(path, O_RDONLY | O_CLOEXEC);
        if (fds[n] >= 0) sync_file_range(fds[n++], 0, 0, SYNC_FILE_RANGE_WRITE);
    }
    for (int j = 0; j < n; j++) {
        sync_file_range(fds[j], 0, 0,
                        SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
        close(fds[j]);
    }
    fsync(dirfd);
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: %s DIR STEPS\n", argv[0]); return 2; }
    const char *dir = argv[1];
    int steps = atoi(argv[2]);
    char run[4096], passed[4096], path[4096], tmp[4096];
    snprintf(passed, sizeof passed, "%s/passed", dir);
    mkdir(passed, 0777);
    snprintf(run, sizeof run, "%s/runs/r%ld", dir, (long)time(NULL) ^ (long)getpid());
    snprintf(path, sizeof path, "%s/runs", dir); mkdir(path, 0777);
    mkdir(run, 0777);
    snprintf(path, sizeof path, "%s/phases", run); mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/events.jsonl", run);
    int events = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    char record[768]; memset(record, 'x', sizeof record - 1); record[sizeof record - 1] = 0;
    char event[300]; memset(event, 'e', sizeof event - 2); event[sizeof event - 2] = '\n'; event[sizeof event - 1] = 0;
    int dirfd = open(passed, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < steps; i++) {
        snprintf(path, sizeof path, "%s/p%05d.json", passed, i); unlink(path);
        if (i % 32 == 0) sync_group(passed, i >= 32 ? i - 32 : 0, i, dirfd);
        snprintf(path, sizeof path, "%s/phases/p%05d", run, i); mkdir(path, 0777);
        snprintf(path, sizeof path, "%s/phases/p%05d/attempt-1", run, i); mkdir(path, 0777);
        snprintf(path, sizeof path, "%s/phases/p%05d/attempt-1/stdout.log", run, i); put(path, NULL);
        snprintf(path, sizeof path, "%s/phases/p%05d/attempt-1/stderr.log", run, i); put(path, NULL);
        snprintf(path, sizeof path, "%s/phases/p%05d/attempt-1/gates.json", run, i); put(path, "[]");
        for (int e = 0; e < 6; e++) if (write(events, event, strlen(event)) < 0) return 1;
        snprintf(tmp, sizeof tmp, "%s/.p%05d.json.tmp", passed, i); put(tmp, record);
        snprintf(path, sizeof path, "%s/p%05d.json", passed, i); rename(tmp, path);
    }
    sync_group(passed, steps - (steps - 1) % 32 - 1, steps, dirfd);
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%d steps: %.1f ms\n", steps, (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6);
    return 0;
}
