#include "autograd/var.h"
