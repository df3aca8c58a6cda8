/* version.h - tessgen's version, printed in every generated file's DO NOT EDIT line. */
#ifndef TG_VERSION_H
#define TG_VERSION_H
#define TG_VERSION "0.1.0"
#endif
