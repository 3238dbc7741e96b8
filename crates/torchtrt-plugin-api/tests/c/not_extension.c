/* A shared library that is not a torchtrt extension: it exports no entry point. */
int not_a_torchtrt_extension(void);

int not_a_torchtrt_extension(void) { return 42; }
