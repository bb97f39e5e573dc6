#define PY_SSIZE_T_CLEAN
#include <Python.h>

static struct PyModuleDef module = {.m_base = PyModuleDef_HEAD_INIT, .m_name = "_fastpath", .m_doc = "stub", .m_size = -1};

PyMODINIT_FUNC PyInit__fastpath(void) { return PyModule_Create(&module); }
