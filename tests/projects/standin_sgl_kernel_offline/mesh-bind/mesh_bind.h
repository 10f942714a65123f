#define MESH_BIND_ONE 1.0f
