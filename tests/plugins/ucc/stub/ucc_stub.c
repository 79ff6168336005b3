/* A libucc.so.1 that is not UCC 1.x: it has a version string and nothing else. */
const char *ucc_get_version_string(void)
{
    return "0.9.0";
}
