/* check_run.h - runs one Check suite and turns its result into an exit status. */
#ifndef XFA_CHECK_RUN_H
#define XFA_CHECK_RUN_H

#include <check.h>
#include <stdlib.h>

/* fork: isolate each test in a child process. Off for GPU runtimes, which may not
 * survive fork (CK_FORK in the environment still overrides either way). */
static inline int xfa_check_run(Suite *suite, int fork)
{
    SRunner *runner = srunner_create(suite);
    if (!fork) srunner_set_fork_status(runner, CK_NOFORK);
    srunner_run_all(runner, CK_NORMAL);
    const int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif
