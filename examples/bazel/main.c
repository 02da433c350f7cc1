#include <stdio.h>
#include "kernels.h"
int main(void) { puts("draft"); return 0; }
