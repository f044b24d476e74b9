/*
 * gpu_info.c — what a GPU result was measured on, read from the bench's
 * own process (see common.h, bench_print_gpu_json): the device's name
 * from the CUDA driver API (libcuda is opened here: the benches do not
 * link it), and the versions of the CUDA runtime, cuDNN, cuBLAS and
 * cuBLASLt this process loaded, asked of the libraries themselves (their
 * version calls, found with dlsym among the libraries a CUDA build of the
 * library links), with the files they came from (/proc/self/maps). A
 * library that is not loaded gives null; a CPU build prints nulls.
 */
#define _GNU_SOURCE /* RTLD_DEFAULT */

#include "common.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The vendor calls, by their C signatures (enums and handles as int). */
typedef int (*cu_init_fn)(unsigned flags);
typedef int (*cu_device_get_fn)(int *device, int ordinal);
typedef int (*cu_device_get_name_fn)(char *name, int len, int device);
typedef int (*int_out_fn)(int *value);           /* cuDriverGetVersion, cudaRuntimeGetVersion */
typedef size_t (*size_fn)(void);                 /* cudnnGetVersion, cublasLtGetVersion */
typedef int (*cublas_property_fn)(int type, int *value); /* 0 major, 1 minor, 2 patch */

static void *symbol(void *lib, const char *name)
{
    return dlsym(lib ? lib : RTLD_DEFAULT, name);
}

static void print_string(const char *s)
{
    putchar('"');
    for (; *s; s++)
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s >= 0x20)
            putchar(*s);
    putchar('"');
}

/* "name": the name of CUDA device `gpu`, or null. */
static void print_device(int gpu)
{
    char name[256] = "";
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    cu_init_fn init = cuda ? (cu_init_fn)symbol(cuda, "cuInit") : NULL;
    cu_device_get_fn get = cuda ? (cu_device_get_fn)symbol(cuda, "cuDeviceGet") : NULL;
    cu_device_get_name_fn get_name =
        cuda ? (cu_device_get_name_fn)symbol(cuda, "cuDeviceGetName") : NULL;
    int_out_fn driver = cuda ? (int_out_fn)symbol(cuda, "cuDriverGetVersion") : NULL;
    int dev = 0, version = 0;
    if (!(init && get && get_name && init(0) == 0 && get(&dev, gpu) == 0 &&
          get_name(name, (int)sizeof name, dev) == 0))
        name[0] = '\0';
    printf("\"device\":");
    if (name[0])
        print_string(name);
    else
        printf("null");
    if (driver && driver(&version) == 0)
        printf(",\"cuda_driver\":%d,", version);
    else
        printf(",\"cuda_driver\":null,");
    /* libcuda stays open: the library's runtime holds it anyway */
}

/* The loaded files whose names start with one of the libraries' names. */
static void print_loaded_files(void)
{
    static const char *const wanted[] = {"libcudart", "libcudnn", "libcublas", "libnccl"};
    static char seen[32][PATH_MAX];
    char line[PATH_MAX + 256];
    int n_seen = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    printf("\"gpu_libs\":[");
    while (f && fgets(line, sizeof line, f)) {
        char *path = strchr(line, '/');
        if (!path)
            continue;
        path[strcspn(path, "\n")] = '\0';
        const char *base = strrchr(path, '/') + 1;
        int match = 0;
        for (size_t i = 0; i < sizeof wanted / sizeof *wanted; i++)
            match |= strncmp(base, wanted[i], strlen(wanted[i])) == 0;
        char real[PATH_MAX];
        if (!match || !realpath(path, real))
            continue;
        int dup = 0;
        for (int i = 0; i < n_seen; i++)
            dup |= strcmp(seen[i], real) == 0;
        if (dup || n_seen == 32)
            continue;
        snprintf(seen[n_seen], sizeof seen[n_seen], "%s", real);
        if (n_seen++)
            putchar(',');
        print_string(real);
    }
    if (f)
        fclose(f);
    printf("],");
}

void bench_print_gpu_json(int gpu)
{
    print_device(gpu);
    int_out_fn runtime = (int_out_fn)symbol(NULL, "cudaRuntimeGetVersion");
    size_fn cudnn = (size_fn)symbol(NULL, "cudnnGetVersion");
    size_fn cublaslt = (size_fn)symbol(NULL, "cublasLtGetVersion");
    cublas_property_fn cublas = (cublas_property_fn)symbol(NULL, "cublasGetProperty");
    int v = 0, major = 0, minor = 0, patch = 0;
    if (runtime && runtime(&v) == 0)
        printf("\"cudart\":%d,", v);
    else
        printf("\"cudart\":null,");
    if (cudnn)
        printf("\"cudnn\":%zu,", cudnn());
    else
        printf("\"cudnn\":null,");
    if (cublas && cublas(0, &major) == 0 && cublas(1, &minor) == 0 && cublas(2, &patch) == 0)
        printf("\"cublas\":\"%d.%d.%d\",", major, minor, patch);
    else
        printf("\"cublas\":null,");
    if (cublaslt)
        printf("\"cublaslt\":%zu,", cublaslt());
    else
        printf("\"cublaslt\":null,");
    print_loaded_files();
}
