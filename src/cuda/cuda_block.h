/*
 * cuda_block.h — device helpers of the kernels where one block works on
 * one row (cuda_decode.cu's decoding step): a block's maximum and
 * double sum over a fixed tree in shared memory, so every reduction has
 * one order whatever the scheduling.
 * Only .cu files include it.
 */
#ifndef SL_CUDA_BLOCK_H
#define SL_CUDA_BLOCK_H

/* The maximum of v over a block of `threads` threads (a power of two),
 * every thread's sh[threadIdx.x] a slot of its own; all threads get it. */
static __device__ inline float sl_cuda_block_max(float v, float *sh, int threads)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = threads / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s)
            sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + s]);
        __syncthreads();
    }
    float r = sh[0];
    __syncthreads();
    return r;
}

/* The sum of v over the block, in double, by the same tree. */
static __device__ inline double sl_cuda_block_sum(double v, double *sh, int threads)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = threads / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s)
            sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    double r = sh[0];
    __syncthreads();
    return r;
}

#endif
