// Vite's build of the dashboard page (testbed/perses.py serves it from dist/).
import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

export default defineConfig({
  plugins: [react()],
  base: './',
  // Some of Perses's dependencies read Node's `global`; the browser has globalThis.
  define: { global: 'globalThis' },
  build: { target: 'es2022', chunkSizeWarningLimit: 20000 },
});
