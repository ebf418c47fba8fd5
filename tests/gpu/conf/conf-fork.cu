// conf-fork: fork() with CUDA initialised and launches possibly still deferred; the child never
// uses CUDA but leaves through exit(), so atexit handlers run there; a second child execs
// /bin/true. A shim that touches the driver or joins its threads from the child's exit work, or
// loses the parent's deferred work across the fork, crashes/hangs the child or changes the bytes.
#include "conf.h"
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

enum { N = 1 << 15, BLOCK = 256, GRID = 64 };

static unsigned salt(int it, int k) { return 0x165667b1u * (unsigned)(it * 16 + k + 1); }

static void launch_iteration(unsigned *x, unsigned *y, cudaStream_t s, int it)
{
    for (int k = 0; k < 5; k++)
        conf_mix<<<GRID, BLOCK, 0, s>>>(x, salt(it, k), N);
    conf_fold<<<GRID, BLOCK, 0, s>>>(y, x, N);
    for (int k = 5; k < 10; k++)
        conf_mix<<<GRID, BLOCK, 0, s>>>(y, salt(it, k), N);
    conf_fold<<<GRID, BLOCK, 0, s>>>(x, y, N);
    CK(cudaGetLastError());
}

// Waits up to 10 s for the child and prints how it ended (compared eager vs shim).
static void reap(pid_t pid, const char *what)
{
    int status = 0;
    for (int waited_ms = 0;; waited_ms += 10) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        CONF_REQUIRE(r >= 0);
        if (r == pid)
            break;
        if (waited_ms >= 10000) {
            kill(pid, SIGKILL);
            CONF_REQUIRE(waitpid(pid, &status, 0) == pid);
            printf("checksum %s timeout\n", what);
            exit(1);
        }
        usleep(10000);
    }
    if (WIFEXITED(status))
        printf("checksum %s exit %d\n", what, WEXITSTATUS(status));
    else
        printf("checksum %s signal %d\n", what, WIFSIGNALED(status) ? WTERMSIG(status) : -1);
    fflush(stdout);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        exit(1);
}

int main(int argc, char **argv)
{
    const int iters = conf_iters(argc, argv, 40);
    cudaStream_t s;
    unsigned *x, *y;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaMalloc(&x, N * sizeof(unsigned)));
    CK(cudaMalloc(&y, N * sizeof(unsigned)));
    CK(cudaMemsetAsync(x, 0x31, N * sizeof(unsigned), s));
    CK(cudaMemsetAsync(y, 0x32, N * sizeof(unsigned), s));
    std::vector<unsigned> host(N);   // the last synced copy of x: the child's input
    uint64_t h = WL_FNV_OFFSET;
    for (int it = 0; it < iters; it++) {
        launch_iteration(x, y, s, it);
        if (it == 10 || it == 20) {
            fflush(stdout);   // else the child's exit() prints the parent's buffered lines again
            pid_t pid = fork();
            CONF_REQUIRE(pid >= 0);
            if (pid == 0 && it == 10) {
                // Child: host work only, then the ordinary exit path with its atexit handlers.
                printf("checksum child %016llx\n", (unsigned long long)wl_fnv1a(0x1234, host.data(), N * sizeof(unsigned)));
                fflush(stdout);
                exit(0);
            }
            if (pid == 0) {
                execl("/bin/true", "true", (char *)NULL);
                _exit(127);
            }
            reap(pid, it == 10 ? "fork-child" : "exec-child");
        }
        CK(cudaStreamSynchronize(s));
        if (it % 10 == 9 || it == iters - 1) {
            CK(cudaMemcpyAsync(host.data(), x, N * sizeof(unsigned), cudaMemcpyDeviceToHost, s));
            CK(cudaStreamSynchronize(s));
            h = wl_fnv1a(h, host.data(), N * sizeof(unsigned));
            h = conf_hash_dev(h, y, N * sizeof(unsigned));
            conf_print(h);
        }
    }
    CK(cudaFree(x));
    CK(cudaFree(y));
    CK(cudaStreamDestroy(s));
    return 0;
}
