/*
 * A fuzz target's entry point over files, in the ordinary test tree (gcc, ASan,
 * UBSan): every committed seed and every input a fuzz run once failed on
 * (tests/fuzz/TARGET/regressions) is run again by every test run.
 *
 * usage: fuzz_replay_TARGET FILE_OR_DIR...
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int one(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;

	if (!f || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0 ||
	    !(buf = malloc((size_t)n + 1)) || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		fprintf(stderr, "fuzz_replay: cannot read %s\n", path);
		if (f)
			fclose(f);
		free(buf);
		return -1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	int n = 0;

	for (int a = 1; a < argc; a++) {
		struct stat st;
		DIR *d;
		struct dirent *e;

		if (stat(argv[a], &st) != 0) {
			fprintf(stderr, "fuzz_replay: %s does not exist\n", argv[a]);
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			if (one(argv[a]) < 0)
				return 1;
			n++;
			continue;
		}
		if (!(d = opendir(argv[a])))
			return 1;
		while ((e = readdir(d))) {
			char path[4096];
			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", argv[a], e->d_name);
			if (one(path) < 0) {
				closedir(d);
				return 1;
			}
			n++;
		}
		closedir(d);
	}
	printf("fuzz_replay: %d inputs replayed\n", n);
	return n > 0 ? 0 : 1;
}
