/* LD_PRELOAD=native_trace.so: on SIGSEGV, SIGBUS, SIGILL, SIGFPE or SIGABRT, print the native
 * stack (library and offset of each frame) to stderr, then die by the same signal. The GPU host has
 * no gdb; Python's faulthandler, which chains to this handler, names only the Python frames.
 *     gcc -shared -fPIC -O1 -o native_trace.so native_trace.c
 */
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void on_fatal(int sig, siginfo_t *info, void *context) {
  (void)context;
  void *frames[64];
  char head[160];
  int n = backtrace(frames, 64);
  int len = snprintf(head, sizeof head, "native_trace: signal %d (%s) at address %p, pid %d\n", sig,
                     strsignal(sig), info->si_addr, (int)getpid());
  if (write(2, head, (size_t)len) < 0) {
  }
  backtrace_symbols_fd(frames, n, 2);
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) static void install(void) {
  static char stack[1 << 16];
  stack_t alt = {.ss_sp = stack, .ss_size = sizeof stack};
  sigaltstack(&alt, NULL);
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = on_fatal;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  int fatal[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
  for (unsigned i = 0; i < sizeof fatal / sizeof fatal[0]; i++) sigaction(fatal[i], &action, NULL);
}
