/* Stands in for the embedded PTX when nvcc is missing: the CPU fake driver ignores module
 * images and finds kernels by name, so an empty image is enough there. */
extern const char kernels_ptx[];
const char kernels_ptx[] = "";
