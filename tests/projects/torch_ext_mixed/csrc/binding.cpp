// gpufleet-hog: 30 0.5
#include <Python.h>

extern "C" int gpufleet_sum(void);

static PyObject *total(PyObject *, PyObject *) { return PyLong_FromLong(gpufleet_sum()); }
static PyMethodDef methods[] = {{"total", total, METH_NOARGS, "The sum of every source's number."}, {nullptr, nullptr, 0, nullptr}};
static PyModuleDef module = {PyModuleDef_HEAD_INIT, "gpufleet_torch_ext_mixed", nullptr, -1, methods};
PyMODINIT_FUNC PyInit_gpufleet_torch_ext_mixed(void) { return PyModule_Create(&module); }
