# Third-party dependencies: all Debian packages (see Makefile's DEB_PACKAGES); nothing is vendored.
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(SQLite3 REQUIRED)
find_package(ZLIB REQUIRED)
find_package(Gloo REQUIRED)
find_package(OpenBLAS REQUIRED)
set(CURSES_NEED_NCURSES TRUE)
set(CURSES_NEED_WIDE TRUE)
find_package(Curses REQUIRED)

# Gloo's Debian package exports a bare imported target without its transitive libraries.
find_library(PARTRAIN_IBVERBS_LIB ibverbs)
find_library(PARTRAIN_HIREDIS_LIB hiredis)
add_library(partrain_gloo INTERFACE)
target_link_libraries(partrain_gloo INTERFACE gloo Threads::Threads)
foreach(lib IN ITEMS PARTRAIN_IBVERBS_LIB PARTRAIN_HIREDIS_LIB)
  if(${lib})
    target_link_libraries(partrain_gloo INTERFACE ${${lib}})
  endif()
endforeach()
add_library(partrain::gloo ALIAS partrain_gloo)

# OpenBLAS's headers only: the library is opened with dlopen where a GEMM needs it
# (runner/device/openblas_library.h). Linked, its constructor started the BLAS thread pool in every
# partrain process before main. PARTRAIN_OPENBLAS_LIBRARY_DIR: where it is looked for second.
add_library(partrain_openblas INTERFACE)
target_include_directories(partrain_openblas INTERFACE ${OpenBLAS_INCLUDE_DIRS})
target_link_libraries(partrain_openblas INTERFACE ${CMAKE_DL_LIBS})
list(GET OpenBLAS_LIBRARIES 0 PARTRAIN_OPENBLAS_LIBRARY)
get_filename_component(PARTRAIN_OPENBLAS_LIBRARY_DIR "${PARTRAIN_OPENBLAS_LIBRARY}" DIRECTORY)
add_library(partrain::openblas ALIAS partrain_openblas)
