// Shared-memory load-to-use latency of one SM: a dependent pointer chase, one thread.
// Each slot holds the shared-space byte address of the next, so the chain is LDS->LDS
// with no address arithmetic between loads. Prints name,params,value,unit,notes rows.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <random>
__global__ void chase(const unsigned* perm, int n, int steps, long long* cyc, unsigned* sink) {
  extern __shared__ unsigned s[];
  unsigned base = (unsigned)__cvta_generic_to_shared(s);
  for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = base + 4u * perm[i];
  __syncthreads();
  if (threadIdx.x) return;
  unsigned j = base;
  for (int i = 0; i < n; ++i) asm volatile("ld.shared.u32 %0, [%0];" : "+r"(j));  // warm
  long long t0 = clock64();
#pragma unroll 16
  for (int i = 0; i < steps; ++i) asm volatile("ld.shared.u32 %0, [%0];" : "+r"(j));
  long long t1 = clock64();
  cyc[0] = t1 - t0; sink[0] = j;
}
int main() {
  const int steps = 1 << 16;
  printf("name,params,value,unit,notes\n");
  for (int n : {256, 4096, 32768}) {
    std::vector<unsigned> order(n), perm(n);
    for (int i = 0; i < n; ++i) order[i] = i;
    std::shuffle(order.begin() + 1, order.end(), std::mt19937(1));
    for (int i = 0; i < n; ++i) perm[order[i]] = order[(i + 1) % n];  // one cycle through all slots
    unsigned *dp, *ds; long long* dc;
    cudaMalloc(&dp, 4 * n); cudaMalloc(&ds, 4); cudaMalloc(&dc, 8);
    cudaMemcpy(dp, perm.data(), 4 * n, cudaMemcpyHostToDevice);
    cudaFuncSetAttribute(chase, cudaFuncAttributeMaxDynamicSharedMemorySize, 4 * n);
    std::vector<double> r;
    for (int rep = 0; rep < 11; ++rep) {
      chase<<<1, 256, 4 * n>>>(dp, n, steps, dc, ds);
      long long c; cudaMemcpy(&c, dc, 8, cudaMemcpyDeviceToHost);
      r.push_back(double(c) / steps);
    }
    std::sort(r.begin(), r.end());
    printf("latency_smem,slots=%d bytes=%d load=ld.shared.u32 steps=%d,%.2f,SM cycles/load,"
           "\"dependent pointer chase in shared memory, one thread; median of 11 (min %.2f max %.2f); %s\"\n",
           n, 4 * n, steps, r[5], r[0], r[10], cudaGetErrorString(cudaGetLastError()));
    cudaFree(dp); cudaFree(ds); cudaFree(dc);
  }
}
