#include "plexus/plexus.h"
