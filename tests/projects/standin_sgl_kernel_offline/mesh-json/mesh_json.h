#define MESH_JSON_ONE 1.0f
